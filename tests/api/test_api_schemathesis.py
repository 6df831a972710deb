"""schemathesis against the live schema of a real server: no 5xx on any input, and every response as documented.

gunicorn serves the API on the test database (PostgreSQL in CI, where NUL characters and huge dates
used to fail); schemathesis's CLI generates requests from /api/schema/ as a researcher and as an admin,
a bounded number per operation (MUSTER_TEST_SCHEMATHESIS_EXAMPLES, 25 by default), and checks that no
response is a server error and that each one's status, content type and body match the schema.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PASSWORD
from tests.live_server import start_gunicorn
from tests.processes import database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
EXAMPLES = os.environ.get("MUSTER_TEST_SCHEMATHESIS_EXAMPLES", "25")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture
def server(require_postgres: None, tmp_path: Path, settings, django_user_model):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # what the server's settings check
    django_user_model.objects.create_user(username="researcher", password=PASSWORD)
    django_user_model.objects.create_user(username="boss", password=PASSWORD, is_staff=True, is_superuser=True)
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MUSTER_CLUSTER": "simulated",
        "MUSTER_DATA_DIR": str(tmp_path),
        # The fuzzer sends hundreds of writes and password exchanges a minute: throttles would only hide operations
        # from it (and their counts, kept in Redis, would outlive this test). tests/accounts/test_accounts.py tests them.
        "MUSTER_THROTTLE_WRITES": "",
        "MUSTER_THROTTLE_TOKEN_REQUESTS": "",
        "MUSTER_THROTTLE_DRY_RUNS": "",
    }
    env.pop("MUSTER_REQUIRE_SERVICES", None)
    web, api = start_gunicorn(env, tmp_path / "web.log")
    try:
        yield api, tmp_path
    finally:
        web.terminate()
        web.wait(20)


@pytest.mark.parametrize("username", ["researcher", "boss"])
def test_no_input_gives_a_server_error_and_every_response_matches_the_schema(server, username: str) -> None:
    api, tmp_path = server
    token = api.login(username)
    # A job of the researcher's, so detail operations meet a real object as well as missing ones.
    if username == "researcher":
        status, _ = api.call(
            "POST",
            "/api/v1/jobs/",
            {"name": "seed", "image": "busybox", "command": ["true"], "nodes": 1, "gpus_per_node": 1, "wall_time_seconds": 60},
        )
        assert status == 201
    run = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{api.base}/api/schema/",
            "--header",
            f"Authorization: Token {token}",
            "--max-examples",
            EXAMPLES,
            "--checks",
            CHECKS,
            "--phases",
            "examples,coverage,fuzzing",
            "--seed",
            "20261123",
            "--no-color",
            "--workers",
            "1",
            "--generation-database",
            "none",
            "--report-dir",
            str(tmp_path / "schemathesis"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = run.stdout + run.stderr
    summary = output[output.find("SUMMARY") :] if "SUMMARY" in output else output[-3000:]
    tested = re.search(r"Tested: (\d+)", output)
    cases = re.search(r"(\d+) generated", output)
    print(
        f"\nschemathesis as {username}: {tested and tested.group(1)} operations, {cases and cases.group(1)} examples, exit {run.returncode}"
    )
    assert run.returncode == 0, output[-12000:]
    assert tested and int(tested.group(1)) >= 20, summary
