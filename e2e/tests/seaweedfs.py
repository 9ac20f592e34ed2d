"""SeaweedFS (Apache-2.0) as the S3-compatible object store of the tiered-storage tests: one
`weed mini` process (master, volume, filer and S3 gateway in one) on loopback.

    s3 = SeaweedS3()           ports chosen here, kept across restarts
    s3.start(data_dir)         start, wait until a signed HEAD of the bucket answers (about 4 s)
    s3.endpoint                "http://127.0.0.1:PORT" (path-style addressing, any region)
    s3.bucket, s3.url          "tiered", "s3://tiered" (created at startup)
    s3.access_key, s3.secret_key
    s3.client()                a boto3 S3 client for it (few retries, short timeouts)
    s3.pause() / s3.resume()   SIGSTOP / SIGCONT: connections are accepted, nothing answers
    with s3.outage(): ...      paused inside the block; outage("stop") stops it instead
                               (connections refused) and starts it again on the same data
    s3.stop()                  SIGTERM, SIGKILL after 15 s
    s3.log_path, s3.log_tail(n)

The binary is SKEIN_WEED_BIN, or the one e2e/tools/seaweedfs-build.sh built into the cache
(e2e/setup.sh runs it; this module never builds, a build takes minutes). Every port weed mini
opens (S3, master, volume, filer, their gRPC ports, the admin server that starts even with
-admin.ui=false) is set by a flag to a free port, so instances run side by side and next to
anything on the default ports; the Iceberg, Lance and WebDAV servers are off. Telemetry is off:
its default posts to the internet.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from brokers import E2E_DIR, free_port

BUILD_SCRIPT = E2E_DIR / "tools" / "seaweedfs-build.sh"


def weed_bin() -> str:
    """The weed binary: SKEIN_WEED_BIN, else the cached build. Raises when neither is there."""
    if path := os.environ.get("SKEIN_WEED_BIN"):
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"SKEIN_WEED_BIN={path} is not an executable file")
        return path
    r = subprocess.run(["bash", str(BUILD_SCRIPT), "--cached"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"no SeaweedFS binary: {r.stderr.strip()}")
    return r.stdout.strip()


class SeaweedS3:
    name = "seaweedfs"
    bucket = "tiered"
    access_key = "skeinkey"
    secret_key = "skeinsecret"
    region = "us-east-1"
    start_timeout = 60.0

    def __init__(self, host: str = "127.0.0.1"):
        """`host`: the address it binds and is reached at (loopback unless a test's brokers live
        in network namespaces, e.g. the chaos harness' bridge address)."""
        self.host = host
        # S3's port; the HTTP and gRPC ports of master, volume, filer and admin; S3's gRPC port.
        ports: list[int] = []
        while len(ports) < 10:
            if (p := free_port()) not in ports:
                ports.append(p)
        self.port, *self._other_ports = ports
        self.workdir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.starts = 0

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}"

    @property
    def log_path(self) -> Path:
        return (self.workdir or Path(".")) / "weed.log"

    def command(self) -> list[str]:
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, admin, admin_grpc, s3_grpc = \
            self._other_ports
        return [
            # glog to stderr (our log) only: its files would go to /tmp
            weed_bin(), "-logtostderr", "mini", f"-dir={self.workdir / 'data'}",
            f"-ip={self.host}", f"-ip.bind={self.host}", "-master.telemetry=false",
            f"-s3.port={self.port}", f"-s3.port.grpc={s3_grpc}",
            f"-s3.config={self.workdir / 's3.json'}", f"-bucket={self.bucket}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}", "-admin.port.legacy=0",
            "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]

    def start(self, data_dir: Path | None = None) -> None:
        """Start on data_dir (weed's data, its config and log go there; default: the last one)
        and wait until the bucket answers a signed request. Raises with the log tail if weed
        exits or is not ready within start_timeout."""
        assert not self.running(), "seaweedfs already running"
        if data_dir is not None:
            self.workdir = Path(data_dir)
        assert self.workdir is not None, "start(data_dir) first"
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        # With this file S3 needs a signature: anonymous requests get 403 (without any identity,
        # weed mini would allow them).
        (self.workdir / "s3.json").write_text(json.dumps({"identities": [{
            "name": "skein",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
        # weed reads WEED_* (viper), AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (one more identity),
        # S3_BUCKET, and *.toml under $HOME/.seaweedfs: none of the caller's.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WEED_", "AWS_", "S3_"))}
        env["HOME"] = str(self.workdir)
        cmd = self.command()
        self.starts += 1
        self._log_marker(f"start #{self.starts}: {' '.join(cmd)}")
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir, env=env,
                                         start_new_session=True)
        self.paused = False
        try:
            self._wait_ready(time.monotonic() + self.start_timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, deadline: float) -> None:
        client, last = None, "no answer"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"seaweedfs exited with code {self.proc.returncode} during "
                                   f"startup; log tail ({self.log_path}):\n{self.log_tail(60)}")
            try:
                if client is None:
                    status = anonymous_status(self.endpoint + "/")
                    if status != 403:
                        raise RuntimeError(f"anonymous GET / answered {status}, not 403")
                    client = self.client()
                client.head_bucket(Bucket=self.bucket)
                return
            except Exception as e:  # noqa: BLE001 - not up yet: try again until the deadline
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise RuntimeError(f"seaweedfs S3 at {self.endpoint} not ready within "
                                   f"{self.start_timeout:.0f}s ({last}); log tail ({self.log_path}):\n"
                                   + self.log_tail(60))
            time.sleep(0.2)

    def client(self, **config):
        """A boto3 S3 client for this server; `config` overrides botocore Config settings."""
        import boto3
        from botocore.config import Config

        settings = dict(s3={"addressing_style": "path"}, retries={"max_attempts": 2, "mode": "standard"},
                        connect_timeout=2, read_timeout=10, proxies={})  # loopback: no proxy
        settings.update(config)
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(**settings))

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, nothing is answered (requests time out)."""
        assert self.running(), "seaweedfs not running"
        self._log_marker("SIGSTOP (outage)")
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused and self.running():
            self._log_marker("SIGCONT")
            os.killpg(self.proc.pid, signal.SIGCONT)
        self.paused = False

    @contextlib.contextmanager
    def outage(self, kind: str = "pause"):
        """The object store is unreachable inside the block: "pause" (requests hang) or "stop"
        (connections refused; started again on the same data and ports afterwards)."""
        assert kind in ("pause", "stop"), kind
        if kind == "pause":
            self.pause()
        else:
            self.stop()
        try:
            yield self
        finally:
            if kind == "pause":
                self.resume()
            else:
                self.start()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL after `timeout`. Returns the exit code (None if killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.resume()  # a stopped process would keep SIGTERM pending
        self._log_marker("SIGTERM")
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._log_marker(f"did not exit {timeout:.0f}s after SIGTERM: SIGKILL")
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            return None
        finally:
            self._remove_sockets()

    def _remove_sockets(self) -> None:
        """weed mini keeps a Unix socket per gRPC port (and the filer's and S3's HTTP ports) in
        /tmp, named by the port; the admin server's, and any after a SIGKILL, stay behind."""
        for port in (self.port, *self._other_ports):
            for kind in ("master-grpc", "volume-grpc", "filer-grpc", "s3-grpc", "admin-grpc", "filer", "s3"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"/tmp/seaweedfs-{kind}-{port}.sock")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _log_marker(self, text: str) -> None:
        with open(self.log_path, "a") as f:
            f.write(f"\n===== e2e: {text} at {time.strftime('%H:%M:%S')} =====\n")

    def log_tail(self, n: int = 100) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return "(no log)"


def anonymous_status(url: str, method: str = "GET", data: bytes | None = None) -> int:
    """HTTP status of an unsigned request."""
    req = urllib.request.Request(url, method=method, data=data)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
    try:
        with opener.open(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
