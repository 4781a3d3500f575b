"""turnplan: a LangGraph supervisor that plans each user turn as TODO rows and drains them."""
