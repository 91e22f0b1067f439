"""python3 -m tests.serve starlette|fastapi|django PORT: one application
under test, served on 127.0.0.1 as in production (uvicorn; Django's threaded
WSGI server), until it is terminated."""
from __future__ import annotations

import os
import sys


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    if kind == "django":
        os.environ["DJANGO_SETTINGS_MODULE"] = "tests.django_app"
        import socketserver

        from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer
        from django.core.wsgi import get_wsgi_application

        class Quiet(WSGIRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

        class Threaded(socketserver.ThreadingMixIn, WSGIServer):
            daemon_threads = True

        server = Threaded(("127.0.0.1", port), Quiet)
        server.set_app(get_wsgi_application())
        server.serve_forever()
        return
    import uvicorn

    from . import apps
    app = apps.starlette_app() if kind == "starlette" else apps.fastapi_app()
    # critical: the handler that raises on purpose would log its traceback
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical")


if __name__ == "__main__":
    main()
