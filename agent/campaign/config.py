"""Model configuration: one file (TOML or YAML) plus CLI flags, shared by `cudal2 propose` and `cudal2 campaign`.

Precedence: built-in defaults < the `[model]` table of `--config FILE` < explicit CLI flags. API keys are never
read from the file or from a flag: the config names an environment variable (`api_key_env`) and the key is read
from it at call time, so no key can end up in a file the run writes.

Example (TOML):

    [model]
    backend = "openai"                 # builtin | openai | anthropic
    base_url = "http://127.0.0.1:8000/v1"
    model_name = "cuda-l2-qwen-32b"
    api_key_env = "VLLM_API_KEY"
    temperature = 0.8
    max_tokens = 8192
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BACKENDS = ("builtin", "openai", "anthropic")

_DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_DEFAULT_MODEL = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "builtin": "builtin"}


class ConfigError(ValueError):
    pass


class MissingKeyError(ConfigError):
    """The API key's environment variable is not set for a remote endpoint (exit code 3, like a rejected key)."""


def is_loopback_url(url: str | None) -> bool:
    """Whether the URL's host is this machine: a loopback IP address or the name `localhost` itself (a parsed
    host, not a substring: http://localhost.invalid and http://127.0.0.1.example.com are remote)."""
    import ipaddress
    from urllib.parse import urlsplit

    if not url:
        return False
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if not host:
        return False
    if host.rstrip(".").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class ModelConfig:
    backend: str = "builtin"
    base_url: str | None = None  # openai: any OpenAI-compatible server; anthropic: override (tests, proxies)
    model_name: str | None = None
    api_key_env: str | None = None  # the NAME of the environment variable that holds the key
    temperature: float = 0.8
    max_tokens: int = 8192
    timeout_s: float = 300.0  # hard deadline of one HTTP request, a trickling body included (--request-timeout)
    max_attempts: int = 5  # per proposal, first try included
    max_retry_s: float = 600.0  # total time one proposal may spend, retries and waits included (--max-retry-seconds)
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 60.0
    concurrency: int = 8  # proposals requested at once
    context_tokens: int = 32768  # the model's context: system + step prompt + max_tokens fit in it (--context-tokens)
    prompt_token_budget: int | None = None  # a further cap on the step prompt alone (agent/proposers/budget.py)
    seed: int = 0  # builtin policy
    extra: dict[str, Any] = field(default_factory=dict)  # passed through to the request body (e.g. top_p)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown model backend {self.backend!r}; choose one of {', '.join(BACKENDS)}")
        if self.model_name is None:
            self.model_name = _DEFAULT_MODEL[self.backend]
        if self.api_key_env is None and self.backend in _DEFAULT_KEY_ENV:
            self.api_key_env = _DEFAULT_KEY_ENV[self.backend]
        if self.backend == "openai" and not self.base_url:
            self.base_url = "https://api.openai.com/v1"
        if self.base_url is not None:
            from urllib.parse import urlsplit

            u = urlsplit(self.base_url)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise ConfigError(f"base_url {self.base_url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        if self.max_tokens < 1:
            raise ConfigError("max_tokens must be positive")
        if not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature must be within [0, 2], got {self.temperature}")
        if not self.timeout_s > 0 or not self.max_retry_s > 0:
            raise ConfigError("the request timeout and the retry time must be positive")
        if self.context_tokens < 1:
            raise ConfigError("context_tokens (--context-tokens) must be positive")

    def api_key(self) -> str | None:
        """The key, read from the environment now. Raises MissingKeyError when the named variable is not set,
        unless the endpoint is on this machine (a loopback address), which is then sent a placeholder key."""
        if self.backend == "builtin":
            return None
        val = os.environ.get(self.api_key_env or "")
        if not val:
            if is_loopback_url(self.base_url):
                return "no-key"  # self-hosted servers (vLLM, Ollama) usually accept any key
            raise MissingKeyError(f"the {self.backend} backend reads its API key from ${self.api_key_env}, which is "
                                  "not set (export it, or name another variable with --api-key-env)")
        return val

    def key_notice(self) -> str:
        """What is sent in place of an unset key to a local endpoint ("" when a key is set or none is needed)."""
        if self.backend == "builtin" or os.environ.get(self.api_key_env or "") or not is_loopback_url(self.base_url):
            return ""
        header = "Authorization: Bearer no-key" if self.backend == "openai" else "x-api-key: no-key"
        return (f"${self.api_key_env} is not set; {self.base_url} is on this machine, so requests carry "
                f"'{header}'")

    def public_dict(self) -> dict[str, Any]:
        """What may be written into run files: everything but secrets (there are none in here by design)."""
        return dataclasses.asdict(self)


_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}
# the flags' names, accepted in a config file too
_ALIASES = {"request_timeout": "timeout_s", "max_retry_seconds": "max_retry_s"}
_FORBIDDEN = {"api_key", "key", "token", "secret", "password", "auth_token"}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The `[model]` table of a TOML or YAML file (or the top level when there is no such table)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    text = p.read_text()
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{p}: not valid YAML: {e}") from None
    elif p.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: not valid TOML: {e}") from None
    else:
        raise ConfigError(f"{p}: config files are .toml, .yaml or .yml")
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a table/mapping at the top level")
    model = data.get("model", data)
    if not isinstance(model, dict):
        raise ConfigError(f"{p}: [model] must be a table/mapping")
    return model


def model_config_from_dict(d: dict[str, Any], origin: str = "config") -> ModelConfig:
    bad = sorted(k for k in d if k.lower() in _FORBIDDEN)
    if bad:
        raise ConfigError(f"{origin}: {', '.join(bad)} must not be in a config file; put the key in an environment "
                          "variable and name it with api_key_env")
    unknown = sorted(set(d) - _FIELDS - set(_ALIASES) - {"model"})
    if unknown:
        raise ConfigError(f"{origin}: unknown model setting(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(_FIELDS))}")
    d = {_ALIASES.get(k, k): v for k, v in d.items()}
    if "model" in d:  # `model = "openai"` is accepted as a synonym of backend, like the CLI flag
        d.setdefault("backend", d.pop("model"))
    return ModelConfig(**d)


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """The model flags, identical on every subcommand that talks to a model."""
    g = parser.add_argument_group("model")
    g.add_argument("--model", choices=BACKENDS, default=None, help="proposer backend (default: builtin)")
    g.add_argument("--base-url", default=None, metavar="URL", help="OpenAI-compatible endpoint, e.g. a vLLM server")
    g.add_argument("--model-name", default=None, metavar="NAME", help="model name sent to the endpoint")
    g.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable that holds the API key (keys are never read from files or flags)")
    g.add_argument("--config", default=None, metavar="FILE", help="TOML or YAML file with a [model] table")
    g.add_argument("--temperature", type=float, default=None)
    g.add_argument("--max-tokens", type=int, default=None, help="longest reply asked for (default 8192)")
    g.add_argument("--context-tokens", type=int, default=None, metavar="N",
                   help="the model's context length: the prompt is cut to leave room for --max-tokens "
                        "(default 32768)")
    g.add_argument("--request-timeout", type=float, default=None, metavar="SECONDS",
                   help="hard deadline of one request, a slowly trickling reply included (default 300)")
    g.add_argument("--max-retry-seconds", type=float, default=None, metavar="SECONDS",
                   help="most time one proposal may spend on a failing endpoint, retries included (default 600)")


def load_model_config(args: argparse.Namespace) -> ModelConfig:
    d: dict[str, Any] = {}
    if getattr(args, "config", None):
        d.update({_ALIASES.get(k, k): v for k, v in read_config_file(args.config).items()})
        if "model" in d:
            d.setdefault("backend", d.pop("model"))
    for flag, key in (("model", "backend"), ("base_url", "base_url"), ("model_name", "model_name"),
                      ("api_key_env", "api_key_env"), ("temperature", "temperature"), ("max_tokens", "max_tokens"),
                      ("context_tokens", "context_tokens"), ("request_timeout", "timeout_s"),
                      ("max_retry_seconds", "max_retry_s")):
        v = getattr(args, flag, None)
        if v is not None:
            d[key] = v
    cfg = model_config_from_dict(d, origin=str(getattr(args, "config", None) or "flags"))
    # the built-in policy talks to no endpoint: flags meant for one are a mistake worth hearing about
    ignored = [f"--{f.replace('_', '-')}" for f in ("base_url", "model_name", "api_key_env", "temperature",
                                                    "max_tokens", "context_tokens", "request_timeout",
                                                    "max_retry_seconds") if getattr(args, f, None) is not None]
    if cfg.backend == "builtin" and ignored:
        raise ConfigError(f"{', '.join(ignored)} configure a model endpoint, and the builtin policy uses none; "
                          "add --model openai or --model anthropic")
    return cfg
