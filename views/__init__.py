"""The app's pages (one per lab, run by Streamlit as scripts) and what they share (common/)."""
