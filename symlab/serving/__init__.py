"""What a web server adds to the labs: results computed once for every session (in worker processes or on
Ray), the result store and its data-only codec, the shipped default results, the warm-up, and the player's
logic. Above the runs, below the pages."""
