"""service.console.pages: the console's shells escape every value; only our assets are served."""

from __future__ import annotations

import pytest

from service.console.pages import CSP, PAGES, SUBSCRIPTION_PAGE, render, static


def test_render_escapes_title_page_and_csrf_but_not_our_body() -> None:
    text = render('x"><script>', "<b>Title</b>", 'tok"en', "<main>ours</main>")
    assert "<script>" not in text and "<b>Title</b>" not in text
    assert "&lt;b&gt;Title&lt;/b&gt;" in text
    assert "tok&quot;en" in text
    assert "<main>ours</main>" in text
    assert "{{" not in text  # every placeholder filled


@pytest.mark.parametrize("name", ["console.js", "console.css", "favicon.svg"])
def test_static_assets_carry_their_type_and_the_policy(name: str) -> None:
    response = static(name)
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert len(response.body) > 0


@pytest.mark.parametrize("name", ["../pages.py", "shell.html", "", "console.js/"])
def test_anything_else_under_static_is_not_found(name: str) -> None:
    assert static(name).status_code == 404


def test_page_paths() -> None:
    assert PAGES["/"] == PAGES[""] == ("overview", "Overview")
    assert SUBSCRIPTION_PAGE.match("/subscriptions/12")
    for path in (
        "/subscriptions/0",
        "/subscriptions/012",
        "/subscriptions/1x",
        "/subscriptions/" + "9" * 19,
    ):
        assert not SUBSCRIPTION_PAGE.match(path)
