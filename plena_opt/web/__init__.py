"""``plena-opt ui``: a local web app over the pipeline simulator (pipeline-simulator §0.3, §5).

``app.create_app`` builds the ASGI app (FastAPI, optional extra ``plena-opt[ui]``): the JSON API
under ``/api/`` and the page under ``/`` (plain JavaScript modules and CSS in ``static/``, no
build step, nothing fetched from the network). Every call into the rest of the product goes
through :mod:`plena_opt.web.service`, so the UI can be re-pointed at the use-case layer.
"""
