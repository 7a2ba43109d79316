"""Placers: assign every op of a graph to a device."""
