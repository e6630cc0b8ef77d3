"""Ask the crew: routing a question, answering it from the manual, by look-ups, or by the review it needs."""
