"""A small real application for the whole-application tests: a threaded server answering
requests, and a client that opens three overlapping connections (20 ms apart), each
asking three times with 30 ms between an answer and the next request, then, after the
last has closed, a fourth connection (it depends on the third).

    python tests/app_three.py                # both ends on 127.0.0.1
    python tests/app_three.py server PORT    # across `magnet path`: the server's side,
    python tests/app_three.py client PORT    # and the client's ($MAGNET_SERVER)
"""
import os
import socket
import sys
import threading
import time

REQUEST, ANSWER, ROUNDS = 300, 20000, 3


def serve(lsock: socket.socket, count: int) -> None:
    def handle(conn: socket.socket) -> None:
        while True:
            got = 0
            while got < REQUEST:
                data = conn.recv(65536)
                if not data:
                    conn.close()
                    return
                got += len(data)
            time.sleep(0.005)                         # the server's own think time
            conn.sendall(b"a" * ANSWER)
    threads = []
    for _ in range(count):
        conn, _ = lsock.accept()
        threads.append(threading.Thread(target=handle, args=(conn,)))
        threads[-1].start()
    for t in threads:
        t.join()


def client(addr, delay: float, rounds: int = ROUNDS) -> None:
    time.sleep(delay)
    sock = socket.create_connection(addr)
    for _ in range(rounds):
        sock.sendall(b"q" * REQUEST)
        got = 0
        while got < ANSWER:
            got += len(sock.recv(65536))
        time.sleep(0.03)
    sock.close()


def clients(addr) -> None:
    threads = [threading.Thread(target=client, args=(addr, 0.02 * i)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client(addr, 0.0, rounds=1)


def main(argv: list[str]) -> int:
    lsock = socket.socket()
    if argv[:1] == ["client"]:
        clients((os.environ["MAGNET_SERVER"], int(argv[1])))
        return 0
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", int(argv[1])) if argv[:1] == ["server"] else ("127.0.0.1", 0))
    lsock.listen(8)
    if argv[:1] == ["server"]:
        serve(lsock, 4)
        return 0
    server = threading.Thread(target=serve, args=(lsock, 4))
    server.start()
    clients(lsock.getsockname())
    server.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
