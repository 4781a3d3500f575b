"""Graph nodes, one a module: ``plan``, ``execute``, ``drain`` and the ordered tools node."""
