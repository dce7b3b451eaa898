"""Structured requests: answer, clarification request or refusal."""
