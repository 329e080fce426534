"""A small client for `termgrade serve` (Python standard library only).

    from termgrade_client import TermgradeClient
    tg = TermgradeClient("http://127.0.0.1:8080", token="...")   # the token serve printed, or its --token-env value
    with tg.session("csv-summary", policy="step-100") as s:
        print(s.instruction)
        print(s.exec("ls /app")["output"])
        grade = s.verify()          # {"reward", "status", "metrics": {"acc", ...}, "tests"}

Step level (sessions) for trainers that own the loop; `episode()` for trainers whose
OpenAI-compatible endpoint the server was started with (`serve --model NAME@URL`): `model` is
{"model": NAME, "temperature"?, ...}, naming one the server serves. A grade's `reward` is None when the infrastructure failed: skip such
a rollout, never train on it as 0.
"""
import json
import urllib.error
import urllib.request


class TermgradeAPIError(Exception):
    """An error answer of the server: HTTP status, code (not_found, gone, over_capacity ...), message."""

    def __init__(self, status, code, message, retry_after=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after


def over_capacity_wait(error, default=5.0):
    """Seconds to wait before asking again after a 429 (the server's Retry-After), else None."""
    if not isinstance(error, TermgradeAPIError) or error.status != 429:
        return None
    try:
        return max(0.1, float(error.retry_after))
    except (TypeError, ValueError):
        return default


class TermgradeClient:
    def __init__(self, base_url, token=None, timeout=3600):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if self.token:
            req.add_header("authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                text = res.read().decode()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read().decode())["error"]
            except Exception:
                err = {"code": "http_error", "message": str(e)}
            raise TermgradeAPIError(e.code, err.get("code"), err.get("message"), e.headers.get("retry-after")) from None

    def tasks(self):
        return self.request("GET", "/v1/tasks")["tasks"]

    def session(self, task, policy=None, split=None):
        body = {"task": task}
        for key, value in (("policy", policy), ("split", split)):
            if value is not None:
                body[key] = value
        return Session(self, self.request("POST", "/v1/sessions", body))

    def group_member(self, group_id, task, n, policy=None, split=None):
        """One member session of the group `group_id` (n sessions of one task, started by the first
        call for that id, `task` a name or "auto"); `Session.member` is its index, `Session.group_id` its group."""
        body = {"task": task, "n": n, "group_id": group_id, "member": True}
        for key, value in (("policy", policy), ("split", split)):
            if value is not None:
                body[key] = value
        return Session(self, self.request("POST", "/v1/groups", body))

    def group(self, group_id):
        """A group's state: {"group_id", "task", "done", "rewards", "statuses", ...}."""
        return self.request("GET", f"/v1/groups/{group_id}")

    def episode(self, task, agent, model, session_id=None, episode_id=None, policy=None):
        body = {"task": task, "agent": agent, "model": model}
        for key, value in (("session_id", session_id), ("episode_id", episode_id), ("policy", policy)):
            if value is not None:
                body[key] = value
        return self.request("POST", "/v1/episodes", body)


class Session:
    """One sandbox: run commands, then verify once. Use it as a context manager to always release it."""

    def __init__(self, client, info):
        self.client = client
        self.id = info["session_id"]
        self.task = info["task"]
        self.instruction = info["instruction"]
        self.tools = info["tools"]
        self.group_id = info.get("group_id")
        self.member = info.get("member")
        self.grade = None

    def exec(self, command, timeout_sec=180):
        return self.client.request("POST", f"/v1/sessions/{self.id}/exec", {"command": command, "timeout_sec": timeout_sec})

    def verify(self):
        self.grade = self.client.request("POST", f"/v1/sessions/{self.id}/verify")
        return self.grade

    def close(self):
        try:
            self.client.request("DELETE", f"/v1/sessions/{self.id}")
        except TermgradeAPIError as e:
            if e.code not in ("gone", "not_found"):
                raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
