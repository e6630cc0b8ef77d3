"""The report: building and writing it, its history in the store, the alerts it sends."""
