import os, socket, sys, time
try:
    os.setsid()
except OSError:
    pass
host, port, until, why = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
s.listen(16)
s.settimeout(1.0)
print('held', flush=True)
body = (why + '\n').encode()
head = b'HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n'
while time.time() < until:
    try:
        c, _ = s.accept()
    except OSError:
        continue
    try:
        c.settimeout(1.0)
        c.recv(65536)
        c.sendall(head + b'Content-Length: %d\r\n\r\n' % len(body) + body)
        c.recv(1)
    except OSError:
        pass
    finally:
        c.close()
