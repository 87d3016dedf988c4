"""The sandbox's HTTP server (provisioner/sandbox/serving.py) keeps connections alive, as the
clouds' front ends do, reads what HTTP/1.1 clients send or refuses it with a 400, and closes every
connection when it stops, so a stopped sandbox answers nothing."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from provisioner.sandbox.serving import serve_in_thread


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
    """With Nagle's algorithm on, a write that follows another unacknowledged one (an answer after
    100 Continue, the tail of an answer larger than a segment) would wait for the client's
    delayed ACK (40 ms on Linux)."""
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


def raw(server, request: bytes) -> bytes:
    """What the server answers to `request` sent as is, read until it closes the connection."""
    with socket.create_connection(("127.0.0.1", server.server.server_port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_request_line_that_is_not_http_is_answered_400_and_the_connection_closed(server):
    answer = raw(server, b"HELLO\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"Connection: close" in answer


def test_a_malformed_header_line_is_answered_400(server):
    answer = raw(server, b"GET /x HTTP/1.1\r\nHost: a\r\n folded: value\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")


def test_an_http_1_0_client_gets_its_answer_and_the_connection_closed(server):
    answer = raw(server, b"GET /old HTTP/1.0\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 201 ") and b"Connection: close" in head
    assert json.loads(body)["path"] == "/old"


def test_a_head_request_gets_the_length_and_no_body(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.server.server_port, timeout=5)
    connection.request("HEAD", "/h")
    response = connection.getresponse()
    assert int(response.getheader("Content-Length")) > 0
    assert response.read() == b""
    assert ask(connection, "/after")["path"] == "/after"  # nothing of a body was left on the stream


def test_a_client_that_expects_100_continue_is_told_to_send_its_body(server):
    answer = raw(
        server,
        b"POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
    )
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 ")
    assert json.loads(answer.partition(b"\r\n\r\n")[2].partition(b"\r\n\r\n")[2])["body"] == "hi"


def test_a_header_whose_name_holds_an_underscore_cannot_pose_as_another():
    seen = {}

    def headers(environ, start_response):
        seen.update({k: v for k, v in environ.items() if k.startswith("HTTP_X_")})
        start_response("200 OK", [])
        return [b""]

    running = serve_in_thread(headers)
    try:
        raw(running, b"GET / HTTP/1.1\r\nX-Role: user\r\nX_Role: admin\r\nConnection: close\r\n\r\n")
    finally:
        running.stop()
    assert seen == {"HTTP_X_ROLE": "user"}


def test_an_emulator_that_fails_answers_500_and_logs_why(caplog):
    def broken(environ, start_response):
        raise RuntimeError("the emulator's own bug")

    running = serve_in_thread(broken)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
        connection.request("GET", "/")
        assert connection.getresponse().status == 500
    finally:
        running.stop()
    assert "the emulator's own bug" in caplog.text


def test_a_connection_s_thread_serves_the_next_and_every_thread_ends_when_the_server_stops():
    before = set(threading.enumerate())
    running = serve_in_thread(echo)
    try:
        for path in ("/one", "/two", "/three"):
            connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
            ask(connection, path)
            connection.close()
            deadline = time.monotonic() + 5
            while running.server.workers.idle == 0 and time.monotonic() < deadline:
                time.sleep(0.01)  # the server sees the close a moment later
        started = [t for t in threading.enumerate() if t not in before and t.name == "sandbox-connection"]
        assert len(started) == 1  # one thread served the three connections, one after another
    finally:
        running.stop()
    for thread in started:
        thread.join(timeout=5)
    assert not any(thread.is_alive() for thread in started)


@pytest.mark.parametrize("length", [b"-5", b"0x5", b"1_0", b"five"])
def test_a_content_length_that_is_not_a_number_of_bytes_is_answered_400(server, length):
    answer = raw(server, b"POST /x HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\nhello")
    assert answer.startswith(b"HTTP/1.1 400 ")


@pytest.mark.parametrize("size", [b"-5", b"0x5", b"zz"])
def test_a_chunk_size_that_is_not_hexadecimal_is_answered_400(server, size):
    request = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n0\r\n\r\n"
    assert raw(server, request).startswith(b"HTTP/1.1 400 ")


def test_an_absolute_target_s_authority_is_the_host():
    seen = {}

    def host(environ, start_response):
        seen.update(host=environ["HTTP_HOST"], path=environ["PATH_INFO"], query=environ["QUERY_STRING"])
        start_response("200 OK", [])
        return [b""]

    running = serve_in_thread(host)
    try:
        request = b"GET http://cloud.example/v1/p?q=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n"
        raw(running, request)
    finally:
        running.stop()
    assert seen == {"host": "cloud.example", "path": "/v1/p", "query": "q=1"}


def test_an_empty_line_before_a_request_is_ignored(server):
    answer = raw(server, b"\r\nGET /after-blank HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 201 ")
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["path"] == "/after-blank"


def test_a_head_request_to_a_werkzeug_response_gets_the_length_of_its_get():
    from werkzeug.wrappers import Response

    running = serve_in_thread(Response(b"twelve bytes"))
    try:
        connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
        connection.request("HEAD", "/")
        response = connection.getresponse()
        assert (response.getheader("Content-Length"), response.read()) == ("12", b"")
    finally:
        running.stop()


def test_the_connection_serves_the_next_request_after_an_emulator_failed(caplog):
    calls = []

    def fails_once(environ, start_response):
        calls.append(environ["PATH_INFO"])
        if len(calls) == 1:
            raise RuntimeError("first call fails")
        start_response("200 OK", [])
        return [b"fine"]

    running = serve_in_thread(fails_once)
    try:
        connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
        connection.request("GET", "/first")
        assert connection.getresponse().read() == b"emulator error"
        socket_used = connection.sock
        connection.request("GET", "/second")
        assert connection.getresponse().read() == b"fine"
        assert connection.sock is socket_used
    finally:
        running.stop()


def test_a_connection_accepted_as_the_server_stops_is_closed_too():
    running = serve_in_thread(echo)
    running.server.close_connections()  # the stop's last step before its workers end
    try:
        connection = http.client.HTTPConnection("127.0.0.1", running.server.server_port, timeout=5)
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            ask(connection, "/late")
    finally:
        running.stop()
