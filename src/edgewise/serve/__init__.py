"""``edgewise serve``: edgewise over HTTP, for apps that are not written in Python.

A FastAPI app (:func:`edgewise.serve.app.create_app`) with one endpoint per library call
(``/v1/pack``, ``/v1/variants``, ``/v1/score``, ``/v1/prune``, ``/v1/highlight``, ``/v1/tokens``),
the registries' names (``/v1/capabilities``), health and readiness probes and Prometheus metrics;
with ``--upstream URL``, an OpenAI-compatible proxy that packs before the model sees the prompt.
The settings are one :class:`edgewise.serve.config.ServeConfig`; ``docs/serve.md`` is the
operator's guide. Nothing here is imported by ``import edgewise``: FastAPI, uvicorn and
prometheus-client come with the ``serve`` extra.
"""
