// PushcastTransport: placeholder until the first file lands.
