"""The trial's rules, sans-IO: no Ray, no asyncio. Everything above builds on it."""
