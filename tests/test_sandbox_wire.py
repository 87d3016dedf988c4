"""The sandbox's HTTP server keeps connections alive, as the clouds' front ends do, and closes
them when it stops, so a stopped sandbox answers nothing."""

from __future__ import annotations

import http.client
import json
import socket

import pytest

from provisioner.sandbox.wire import serve_in_thread


def echo(environ, start_response):
    body = environ["wsgi.input"].read()
    answer = json.dumps(
        {"path": environ["PATH_INFO"], "query": environ["QUERY_STRING"], "body": body.decode()}
    )
    start_response("201 Created", [("Content-Type", "application/json")])
    return [answer.encode()]


@pytest.fixture
def server():
    running = serve_in_thread(echo)
    yield running
    running.stop()


def ask(connection: http.client.HTTPConnection, path: str, body: bytes | None = None) -> dict:
    connection.request("POST" if body else "GET", path, body=body)
    response = connection.getresponse()
    assert response.status == 201
    assert response.getheader("Content-Length") is not None
    return json.loads(response.read())


def test_one_connection_carries_many_requests_bodies_included(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.server.server_port, timeout=5)
    assert ask(connection, "/a%2Fb?x=1", b'{"n": 1}') == {"path": "/a/b", "query": "x=1", "body": '{"n": 1}'}
    socket_used = connection.sock
    assert ask(connection, "/second")["path"] == "/second"
    assert connection.sock is socket_used  # the same connection answered both


def test_answers_are_sent_without_waiting_for_the_client_s_ack(server):
    """Headers and body are two writes: with Nagle's algorithm on, a kept-alive connection's
    second answer would wait for the client's delayed ACK of the first (40 ms on Linux)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server.server_port, timeout=5)
    ask(connection, "/first")
    (accepted,) = server.server.open_connections
    assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_chunked_request_body_is_read_whole_before_the_next_request(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.server.server_port, timeout=5)
    connection.request("POST", "/chunked", body=iter([b"ab", b"cd"]), encode_chunked=True)
    response = connection.getresponse()
    assert json.loads(response.read())["body"] == "abcd"
    assert ask(connection, "/after")["path"] == "/after"


def test_stopping_closes_kept_alive_connections():
    running = serve_in_thread(echo)
    connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
    ask(connection, "/before")
    running.stop()
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        ask(connection, "/after")


def test_an_idle_kept_alive_connection_is_closed_after_the_timeout_without_a_word(caplog):

    running = serve_in_thread(echo)
    handler = running.server.RequestHandlerClass
    usual, handler.timeout = handler.timeout, 0.2  # type: ignore[attr-defined]
    try:
        connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
        ask(connection, "/before")
        connection.sock.settimeout(5)
        assert connection.sock.recv(1) == b""  # the server closed the idle connection
    finally:
        handler.timeout = usual  # type: ignore[attr-defined]
        running.stop()
    assert "timed out" not in caplog.text
