"""Ways to run the supervisor outside the graph API: ``turnplan``, one turn, checkpoints,
server workers."""
