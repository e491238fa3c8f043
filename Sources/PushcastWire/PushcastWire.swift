// PushcastWire: placeholder until the first file lands.
