"""The app's pages (one per lab: its main() draws it) and what they share (common/)."""
