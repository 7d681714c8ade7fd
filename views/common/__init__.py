"""What the views share: page state, charts, computed results, the player, files."""
