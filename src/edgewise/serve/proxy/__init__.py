"""The OpenAI-compatible proxy (``--upstream URL``): documents packed into a chat on the way.

- :mod:`.routes`: the proxy's routes and the upstream client: what is packed, what is forwarded,
  and how the answer comes back.
- :mod:`.conversation`: a chat completions request packed (the budget, the earlier turns kept, the
  splice); :mod:`.openai_responses`: the same for OpenAI's Responses API (``POST /v1/responses``);
  :mod:`.chatformat`: what one chat message costs in tokens.
- :mod:`.passthrough`: every other ``/v1/*`` path, forwarded unchanged.
- :mod:`.readbody`: a request body read as strict JSON; :mod:`.rawjson`: its numbers kept as they
  came, so what the proxy does not change is forwarded as sent.
- :mod:`.disconnect`: an upstream call cancelled when the client leaves.

``docs/proxy.md`` is the guide.
"""
