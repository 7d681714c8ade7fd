"""Why the pages live in views/, not in a top-level pages/ folder.

In Streamlit 1.67 a ``pages/`` folder beside the main script switches a server to the legacy multipage route
(``PagesManager.uses_pages_directory``) until some script run calls ``st.navigation``. Until then a link to a lab
runs ``pages/<lab>.py`` alone: app.py's frame (page config, server settings, navigation) never runs. In a real
server the first visitors who arrive by a lab's link, as a class does when a lecturer shares one, see a blank page
until someone opens the home page. So the name is not free. This test keeps that decision honest: once Streamlit
leaves the folder to ``st.navigation``, it fails, and views/ can become pages/ (CONTRIBUTING.md, Layers)."""

import pytest
from streamlit.testing.v1 import AppTest

APP = """
import streamlit as st

st.sidebar.write("frame ran")
home = st.Page(lambda: st.title("home"), title="Home", default=True)
st.navigation([home, st.Page("{folder}/toy.py", url_path="toy")]).run()
"""
LAB_PAGE = 'import streamlit as st\n\nst.title("toy")\n'


def open_lab_link(root, folder: str) -> AppTest:
    (root / folder).mkdir()
    (root / folder / "toy.py").write_text(LAB_PAGE)
    (root / "app.py").write_text(APP.format(folder=folder))
    at = AppTest.from_file(str(root / "app.py"), default_timeout=30)
    at.switch_page(f"{folder}/toy.py")
    return at.run()


@pytest.mark.parametrize("folder, frame_runs", [("pages", False), ("views", True)])
def test_only_a_folder_not_named_pages_leaves_the_link_to_the_navigation(tmp_path, folder, frame_runs):
    at = open_lab_link(tmp_path, folder)
    assert not at.exception
    assert [title.value for title in at.title] == ["toy"]
    ran = "frame ran" in [element.value for element in at.sidebar.markdown]
    assert ran == frame_runs, (
        "Streamlit now leaves a pages/ folder to st.navigation: views/ can become pages/"
        if folder == "pages"
        else "the app's frame did not run"
    )
