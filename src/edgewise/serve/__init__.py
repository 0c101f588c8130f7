"""``edgewise serve``: edgewise over HTTP, for apps that are not written in Python.

A FastAPI app (:func:`edgewise.serve.app.create_app`) with one endpoint per library call
(``/v1/pack``, ``/v1/variants``, ``/v1/score``, ``/v1/prune``, ``/v1/highlight``, ``/v1/tokens``),
the registries' names (``/v1/capabilities``), health and readiness probes and Prometheus metrics;
with ``--upstream URL``, an OpenAI-compatible proxy that packs before the model sees the prompt.
The settings are one :class:`edgewise.serve.config.ServeConfig`; ``docs/serve.md`` is the
operator's guide. Nothing here is imported by ``import edgewise``: FastAPI, uvicorn and
prometheus-client come with the ``serve`` extra.

What is where (each part imports only the parts above it):

- here: :mod:`.config` (every setting) and :mod:`.errors` (the JSON error body), shared by all;
- :mod:`.transport`: the connections and the limits on what they carry (uvicorn's HTTP protocol
  with bounds, TCP_NODELAY, body, header and request limits);
- :mod:`.api`: the edgewise HTTP API (routes, schemas, the work of each endpoint, its cost and
  admission, auth, assets, metrics, warm-up);
- :mod:`.proxy`: the OpenAI-compatible proxy (chat completions and the Responses API packed, the
  rest passed through);
- here again: :mod:`.app` (the app that puts them together), :mod:`.server` (uvicorn, one process
  or several workers), :mod:`.ray_serve` (``--ray``) and ``__main__`` (``python -m edgewise.serve``).
"""
