"""A stand-in GPU worker process that misbehaves on request, for testing the parent's failure handling on a
machine without a GPU. It speaks the real protocol (evaluator/worker.py); requests name the misbehaviour."""
import json
import os
import signal
import sys
import time

out = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
out.write(json.dumps({"event": "ready", "gpu": {"name": "fake", "pid": os.getpid()}}) + "\n")
for line in sys.stdin:
    req = json.loads(line)
    what = req.get("op")
    if what == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif what == "abort":
        print("about to abort", flush=True)  # lands on stderr, never in the protocol
        os.abort()
    elif what == "hang":
        out.write(json.dumps({"event": "progress", "msg": "calling candidate"}) + "\n")
        time.sleep(3600)
    elif what == "slow_but_alive":
        for i in range(5):
            time.sleep(0.3)
            out.write(json.dumps({"event": "progress", "msg": f"step {i}"}) + "\n")
        out.write(json.dumps({"event": "result", "id": req["id"], "result": {"status": "ok", "pid": os.getpid()}}) + "\n")
    elif what == "poison":
        out.write(json.dumps({"event": "result", "id": req["id"],
                              "result": {"status": "crash", "reason": "illegal address", "poisoned": True}}) + "\n")
        sys.exit(4)
    elif what == "noisy":
        print("candidate printf output", flush=True)
        out.write("this is not json\n")
        out.write(json.dumps({"event": "result", "id": req["id"], "result": {"status": "ok", "pid": os.getpid()}}) + "\n")
    else:
        out.write(json.dumps({"event": "result", "id": req["id"], "result": {"status": "ok", "pid": os.getpid()}}) + "\n")
