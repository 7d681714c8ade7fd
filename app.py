"""SymLab home page and navigation: ``streamlit run app.py``."""

from pathlib import Path

import streamlit as st

from symlab.labs import LABS
from symlab.serving import cards, findings, pace
from views.common import binding, browser, lessons, pages, process, sessions

ASSETS = Path(__file__).parent / "assets"


# A local file: a material-icon favicon would be fetched from fonts.gstatic.com, which a classroom
# network or an offline laptop may not reach.
def on_a_phone() -> bool:
    """The browser says it is a phone or tablet ("Mobi"/"Android" in its user agent, as every mobile browser does)."""
    agent = st.context.headers.get("User-Agent", "")
    return "Mobi" in agent or "Android" in agent


# On a phone the sidebar starts closed and stays so when the phone turns: Streamlit's "auto" opens it wherever the
# window is wider than a tablet, so turning a phone sideways (844 px) spread it over a third of the screen.
st.set_page_config(
    page_title="SymLab",
    page_icon=str(ASSETS / "icon.svg"),
    layout="wide",
    initial_sidebar_state="collapsed" if on_a_phone() else "auto",
)
st.logo(str(ASSETS / "logo.svg"), size="large", icon_image=str(ASSETS / "icon.svg"))
SETTINGS = binding.server_settings(report=True)
if SETTINGS.hosted:  # a visitor sees that something failed, never the traceback (the server's log keeps it)
    st.set_option("client.showErrorDetails", "none")


process.threads_set(SETTINGS.live.torch_threads)
process.large_blocks_returned()
process.theme_read_once()
sessions.sweep_now_and_then()  # what visitors who left for good still hold (views/common/sessions.py)
if SETTINGS.hosted:
    st.sidebar.caption(f"Shared server, caps for everyone: {SETTINGS.describe()}.")


CARDS_PER_ROW = 3  # a phone stacks them


def lab_card(column, lab, page) -> None:
    """A lab's card: a picture of its key chart (assets/cards, taken by tests/cards.py), its link, and what it
    measured (its blurb where it has no finding of its own)."""
    with column.container(border=True):
        alt = f"{lab.title}: a picture of its key chart"
        link = cards.card_link(lab.name)
        if link is not None:  # served by serve.py's route: no media file, kept by the browser
            st.markdown(f"![{alt}]({link})")
        elif (picture := cards.card_picture(lab.name)) is not None:  # app.py alone, or AppTest
            st.image(picture, width="stretch", output_format="JPEG", alt=alt)
        st.page_link(page, label=f"**{lab.title}**", icon=lab.icon)
        for finding in findings.of_lab(lab.name) or [lab.blurb]:
            st.markdown(finding)


def home():
    st.title("SymLab")
    st.markdown(
        "How the symmetries of a neural network's weights affect variational inference: permuting hidden "
        "units leaves the function unchanged, so the posterior has many equivalent modes. Each lab shows "
        "one step, live, with the formulas beside the pictures; every control lives in the page's link."
    )
    st.subheader("What the labs measured")
    for row in range(0, len(LABS), CARDS_PER_ROW):
        for column, lab, page in zip(st.columns(CARDS_PER_ROW), LABS[row:], LAB_PAGES[row:]):
            lab_card(column, lab, page)
    lessons.show_path()
    st.caption(f"Compute device: {process.device_text()}")
    st.caption(
        "Papers: Gelberg, van der Ouderaa, van der Wilk, Gal (2024), *Variational Inference Failures "
        "Under Model Symmetries*; Laurent, Aldea, Franchi (ICLR 2024); Rossi, Singh, Hannagan (NeurIPS 2023)."
    )


LAB_PAGES = [pages.lab_page(lab) for lab in LABS]
LABS_BY_NAME = {lab.name: lab for lab in LABS}
navigation = st.navigation([st.Page(home, title="Home", icon=":material/home:", default=True), *LAB_PAGES])
# One style element for the tables, sent with every page run. A grid's toolbar (search, download, full screen) shows
# above its top edge when the table is touched: room for it there, or on a phone it covers the last line of the text
# above. The projector's HTML tables (views/common/tables.py) break a long word or number rather than hide their
# last columns where the page is narrow (a phone in presentation mode).
st.html(
    "<style>[data-testid='stElementContainer']:has([data-testid='stDataFrame']) { margin-top: 1.75rem; } "
    "@media (max-width: 640px) { [data-testid='stTable'] table { table-layout: fixed; width: 100%; } "
    "[data-testid='stTable'] :is(td, th, td *, th *) { white-space: normal; overflow-wrap: anywhere; } }</style>"
)
# A run of the whole page: someone asked for it; one of a browser's at a time.
with pace.BROWSER_TURNS.turn(browser.browser_id()), pace.INTERACTIONS.running():
    navigation.run()
if navigation.url_path in LABS_BY_NAME:
    lessons.show_next_step(navigation.url_path)
