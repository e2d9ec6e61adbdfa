"""One board's link: the port (serial_for_url), the Firmata protocol, its worker thread,
the reports it hears."""
