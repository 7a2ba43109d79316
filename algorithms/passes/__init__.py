"""Graph passes: rewrite a graph and keep the map back to the original ops."""
