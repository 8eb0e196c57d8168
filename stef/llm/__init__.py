"""The LLM seam: the OpenAI-compatible judge backend and a scripted fake for tests."""
