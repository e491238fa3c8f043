#!/usr/bin/env python3
"""A hostile APNs look-alike for MetricsTests: HTTP/2 over TLS on loopback (Debian's python3-h2)
that answers every request 400 with a reason never seen before ("Hostile00001", "Hostile00002",
...), so a campaign collects as many distinct reasons as it has rows. Prints PORT=N once it
listens; stops after --seconds.

    hostile_reasons.py --cert CERT.pem --key KEY.pem [--seconds 120]
"""
import argparse
import json
import os
import socket
import ssl
import threading

import h2.config
import h2.connection
import h2.events

counter_lock = threading.Lock()
counter = 0


def next_reason():
    global counter
    with counter_lock:
        counter += 1
        return "Hostile%05d" % counter


def answer(connection, stream_id):
    body = json.dumps({"reason": next_reason()}).encode()
    connection.send_headers(stream_id, [(":status", "400"), ("content-type", "application/json"),
                                        ("content-length", str(len(body)))])
    connection.send_data(stream_id, body, end_stream=True)


def serve(sock):
    config = h2.config.H2Configuration(client_side=False, validate_inbound_headers=False)
    connection = h2.connection.H2Connection(config=config)
    connection.initiate_connection()
    sock.sendall(connection.data_to_send())
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for event in connection.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    answer(connection, event.stream_id)
            pending = connection.data_to_send()
            if pending:
                sock.sendall(pending)
    except (OSError, h2.exceptions.ProtocolError):
        return
    finally:
        sock.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--seconds", type=float, default=120)
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print("PORT=%d" % listener.getsockname()[1], flush=True)
    threading.Timer(args.seconds, lambda: os._exit(0)).start()
    while True:
        try:
            raw, _ = listener.accept()
        except OSError:
            break
        try:
            tls = context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            continue
        threading.Thread(target=serve, args=(tls,), daemon=True).start()
    listener.close()


if __name__ == "__main__":
    main()
