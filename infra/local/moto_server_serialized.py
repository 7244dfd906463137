"""moto's server mode, with the requests whose outcome depends on a condition serialized.

Real DynamoDB evaluates a ConditionExpression and applies the write atomically, and S3
does the same for If-None-Match / If-Match. moto checks the condition and then writes in
plain Python on a threaded server, so two concurrent conditional requests can both pass
(measured: 10 of 150 rounds of 8 concurrent conditional UpdateItems had two winners).
sluice's single-writer lease rests on that atomicity, so the stand-in must provide it:
every DynamoDB request and every conditional S3 request runs under one lock. Other
requests stay concurrent.

Usage: python moto_server_serialized.py [moto_server options] (same as `moto_server`).
"""

import threading

from moto import server


class Serialized:
    """WSGI middleware: runs DynamoDB and conditional S3 requests one at a time."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self.app, name)

    def __call__(self, environ, start_response):
        dynamodb = environ.get("HTTP_X_AMZ_TARGET", "").startswith("DynamoDB")
        conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        if dynamodb or conditional:
            with self.lock:
                # Consume the response inside the lock: the write happens while it is built.
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


_dispatcher = server.DomainDispatcherApplication
server.DomainDispatcherApplication = lambda create_app: Serialized(_dispatcher(create_app))

if __name__ == "__main__":
    server.main()
