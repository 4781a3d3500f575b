"""What each LLM call is sent: the system prompt, the history window and the plan
view, for every profile."""
