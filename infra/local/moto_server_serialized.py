"""moto's server mode, with the requests whose outcome depends on a condition serialized.

Real DynamoDB evaluates a ConditionExpression and applies the write atomically, and S3
does the same for If-None-Match / If-Match. moto checks the condition and then writes in
plain Python on a threaded server, so two concurrent conditional requests can both pass
(measured: 10 of 150 rounds of 8 concurrent conditional UpdateItems had two winners).
sluice's single-writer lease rests on that atomicity, so the stand-in must provide it:
every DynamoDB request and every conditional S3 request runs under one lock. S3 Tables'
UpdateTableMetadataLocation (a version-token check, then the move) is serialized the same
way: every S3 Tables request runs under the lock. Other requests stay concurrent.

Two S3 Tables answers of moto 5.2 (5.2.6 too) are put in AWS's documented shape (the
service model every SDK parses): UpdateTableMetadataLocation answers `tableARN` and a
`namespace` list (moto: `tableArn`, a string), and GetTable answers a `modifiedBy` string
(moto: null for a table never modified). The Rust SDK refuses moto's shapes; the values
are moto's own.

Usage: python moto_server_serialized.py [moto_server options] (same as `moto_server`).
"""

import json
import threading

from moto import server
from moto.s3tables.responses import S3TablesResponse


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
        s3tables = "/s3tables/aws4_request" in environ.get("HTTP_AUTHORIZATION", "")
        if dynamodb or conditional or s3tables:
            with self.lock:
                # Consume the response inside the lock: the write happens while it is built.
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def _reshape(action, fix):
    """Rewrites the JSON body of S3 Tables `action`'s successful answer with `fix`."""
    original = getattr(S3TablesResponse, action)

    def answer(self):
        status, headers, body = original(self)
        if status == 200 and body:
            doc = json.loads(body)
            fix(doc)
            body = json.dumps(doc)
        return status, headers, body

    setattr(S3TablesResponse, action, answer)


def _update_answer(doc):
    if "tableArn" in doc:
        doc["tableARN"] = doc.pop("tableArn")
    if isinstance(doc.get("namespace"), str):
        doc["namespace"] = [doc["namespace"]]


def _get_table_answer(doc):
    if doc.get("modifiedBy") is None:
        doc["modifiedBy"] = doc.get("createdBy")


_reshape("update_table_metadata_location", _update_answer)
_reshape("get_table", _get_table_answer)

_dispatcher = server.DomainDispatcherApplication
server.DomainDispatcherApplication = lambda create_app: Serialized(_dispatcher(create_app))

if __name__ == "__main__":
    server.main()
