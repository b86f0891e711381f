"""The master's durable state. See docs/service.md, "What is durable when"."""
