"""cdc dashboard: `streamlit run app.py` (`-- --db PATH` for another store).

Picks the store (building the demo on first launch), then routes to the pages.
"""

import streamlit as st

import ui

st.set_page_config(page_title="cdc: what changed", page_icon=":material/difference:", layout="wide")

choice = ui.open_store()
st.sidebar.caption(f"Store: `{choice.path}` ({choice.reason})")

# Once the store holds two crawl runs, what changed between them is the first question.
site_first = len(ui.finished_runs(ui.current_store())) >= 2
navigation = st.navigation([
    st.Page("views/site.py", title="Site", icon=":material/travel_explore:", url_path="site",
            default=site_first),
    st.Page("views/overview.py", title="Overview", icon=":material/dashboard:", url_path="overview",
            default=not site_first),
    st.Page("views/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("views/search.py", title="Search", icon=":material/search:", url_path="search"),
    st.Page("views/trends.py", title="Trends", icon=":material/trending_up:", url_path="trends"),
    st.Page("views/boilerplate.py", title="Boilerplate", icon=":material/layers:", url_path="boilerplate"),
    st.Page("views/export.py", title="Export", icon=":material/download:", url_path="export"),
])
navigation.run()
