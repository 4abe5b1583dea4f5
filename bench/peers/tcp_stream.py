#!/usr/bin/python3
"""The bare-TCP peer of the cluster benchmark: how many bytes per second one TCP connection
gets through an emulated link, in both directions at once (as the ring uses a link).

    tcp_stream.py --peer ADDRESS [--port 5201] [--bytes 200000000]

Run it on two hosts at the same time, each naming the other: each listens on --port, connects
to the peer (retrying for up to 20 s while the peer starts), sends --bytes from one thread
while it receives the peer's bytes in another, and prints one JSON line with the receive
rate (first byte to end of stream) and the send rate (connect to last byte handed to the
kernel). Standard library only.
"""
import argparse
import json
import socket
import threading
import time

CHUNK = 1 << 20


def receive(server, result):
    conn, _ = server.accept()
    buf = bytearray(CHUNK)
    n, first = 0, None
    while True:
        k = conn.recv_into(buf)
        if not k:
            break
        if first is None:
            first = time.perf_counter()
        n += k
    result["recv_bytes"] = n
    result["recv_Bps"] = n / (time.perf_counter() - first) if first else 0.0
    conn.close()


def connect(peer, port, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return socket.create_connection((peer, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # the peer's listener is not up yet: bounded retry


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--port", type=int, default=5201)
    ap.add_argument("--bytes", type=int, default=200_000_000)
    args = ap.parse_args()

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", args.port))
    server.listen(1)
    result = {}
    receiver = threading.Thread(target=receive, args=(server, result))
    receiver.start()

    conn = connect(args.peer, args.port, 20)
    data = b"\0" * CHUNK
    t0 = time.perf_counter()
    sent = 0
    while sent < args.bytes:
        conn.sendall(data)
        sent += len(data)
    result["send_Bps"] = sent / (time.perf_counter() - t0)
    conn.shutdown(socket.SHUT_WR)
    receiver.join()
    conn.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
