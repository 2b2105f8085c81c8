"""What a person sees of a comparison: Plotly figures, the two texts side by side with the
changes marked, change summaries as CSV, and which store the dashboard opens."""
