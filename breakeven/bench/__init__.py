"""``breakeven bench``: an HTTP load generator for OpenAI-compatible servers that writes one
measurement row per request, with the server's own counters.

Imports only the layers below the analysis (core, model, iotools, render).
"""
