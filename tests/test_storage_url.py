"""Storage URLs: a password never reaches a printed line, whatever characters it holds."""

from __future__ import annotations

import pytest

from dltune._errors import ParameterError
from dltune._storage_url import _scrub, check_url, mask_url

# A raw '@' in the password: SQLAlchemy would take "ss99Q@127.0.0.1" for the host.
RAW_AT = "postgresql://dltune:pa@ss99Q@127.0.0.1:1/dltune"
# Percent-encoded '@' and raw ':' and '/': a URL SQLAlchemy reads, sent to the (absent) server.
ENCODED = "postgresql://dltune:pa:ss/99Q%40x@127.0.0.1:1/dltune"


@pytest.mark.parametrize(
    "url, masked",
    [
        (RAW_AT, "postgresql://dltune:***@127.0.0.1:1/dltune"),
        (ENCODED, "postgresql://dltune:***@127.0.0.1:1/dltune"),
        ("postgresql://u:a:b/c@d@h:5432/x", "postgresql://u:***@h:5432/x"),
        ("mysql+pymysql://u:p%2Fq%3A@h/x", "mysql+pymysql://u:***@h/x"),
        ("postgresql://u:pa'ss\"@h/x", "postgresql://u:***@h/x"),
        ("postgresql://my@server:pw@h/x", "postgresql://my@server:***@h/x"),  # Azure-style user
        # Without a password, or a SQLite file (whose path may hold '@' and ':'): unchanged.
        ("postgresql://bob@h/x", "postgresql://bob@h/x"),
        ("postgresql://h:5432/x", "postgresql://h:5432/x"),
        ("sqlite:///dltune.db", "sqlite:///dltune.db"),
        ("sqlite:////tmp/me@work:1/dltune.db", "sqlite:////tmp/me@work:1/dltune.db"),
        # In a text: each URL masked up to the blank that ends it.
        (f"Got {RAW_AT!r} instead; and {ENCODED}.", "Got 'postgresql://dltune:***@127.0.0.1:1/dltune' "
                                                     "instead; and postgresql://dltune:***@127.0.0.1:1/dltune."),
    ],
)
def test_mask_url_hides_everything_up_to_the_last_at(url, masked):
    assert mask_url(url) == masked


def test_scrub_hides_the_password_alone_as_written_and_decoded():
    text = f"cannot connect to {ENCODED}: password 'pa:ss/99Q%40x' (pa:ss/99Q@x) rejected"
    scrubbed = _scrub(text, ENCODED)
    assert "99Q" not in scrubbed
    assert scrubbed == ("cannot connect to postgresql://dltune:***@127.0.0.1:1/dltune: "
                        "password '***' (***) rejected")
    assert _scrub("no such table", "sqlite:///a@b.db") == "no such table"


def test_a_raw_at_in_the_password_is_refused_without_showing_it():
    with pytest.raises(ParameterError) as info:
        check_url(RAW_AT)
    assert str(info.value) == ("The 'storage' URL's password must write '@' as '%40' (percent-encoded). "
                               "Got 'postgresql://dltune:***@127.0.0.1:1/dltune' instead.")
    for fine in (ENCODED, "postgresql://u:p@h/db?application_name=a@b", "postgresql://my@server:pw@h/x",
                 "sqlite:////tmp/a:b@c@d.db"):
        assert check_url(fine) == fine


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "--study", "x"],
        ["worker", "--study", "x", "--json"],
        ["dashboard"],
        ["report", "--storage", "{url}"],
        ["recommend", "--model", "mlp", "--storage", "{url}"],
    ],
)
def test_no_command_prints_the_password(cli, args):
    for url in (RAW_AT, ENCODED):
        done = cli(*(a.format(url=url) for a in args), env={"DLTUNE_STORAGE": url}, timeout=300)
        output = done.stdout + done.stderr
        assert done.returncode == 2, output
        assert "ss99Q" not in output and "99Q" not in output, output
        assert "postgresql://dltune:***@127.0.0.1:1/dltune" in output
