import os, pty, sys, time, select, fcntl, termios, struct
out = os.environ.get("OUT", ".")
pid, fd = pty.fork()
if pid == 0:
    os.environ["TERM"] = "xterm-256color"
    os.execv(sys.argv[1], [sys.argv[1]] + sys.argv[2:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
data = b""
def pump(t):
    global data
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
pump(2.5)
os.write(fd, b"q")
pump(1.5)
_, status = os.waitpid(pid, 0)
open(os.path.join(out, "frame.raw"), "wb").write(data)
print("exit status", status, "bytes", len(data))
