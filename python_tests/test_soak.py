"""Short versions of the reliability campaigns (python_tests/soak/; the
long ones run with `make soak` and their figures are in
docs/reliability.md): kill -9 during writes and lifecycle actions,
corrupted files, many clients, slow and hostile clients. Each campaign
returns its findings; the test fails on any."""

import pytest

from flightd_fixture import flightd_bin  # noqa: F401 (fixture)
from soak import corrupt, evil, kill9, load
from soak.run import SHORT


@pytest.mark.parametrize("campaign", [kill9, corrupt, load, evil], ids=lambda m: m.__name__.split(".")[-1])
def test_campaign_short(flightd_bin, tmp_path, campaign):  # noqa: F811
    name = campaign.__name__.split(".")[-1]
    res = campaign.run(flightd_bin, str(tmp_path), seed=20261124, log=lambda *a: None, **SHORT[name])
    assert not res["failures"], "\n".join(res["failures"][:20])
