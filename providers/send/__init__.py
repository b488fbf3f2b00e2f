"""The send paths: the fast aiohttp path, LiteLLM, retries, prefix caching, context errors, scrubbing."""
