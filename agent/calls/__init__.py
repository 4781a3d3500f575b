"""What happens to a model's tool calls before and after they run: order, gate,
catalog, schemas, safe input."""
