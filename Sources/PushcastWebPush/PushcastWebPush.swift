// PushcastWebPush: the Web Push protocol pieces (RFC 8030 delivery, RFC 8291 message encryption,
// RFC 8292 VAPID), as values and sans-I/O objects: subscriptions and their push-service origins
// (WebPushSubscription), the aes128gcm content coding (WebPushEncryptor, WebPushDecryptor), and
// the application server's identity (VAPIDKey, VAPIDSigner, VAPIDVerifier for the mock).
// The cryptography is OpenSSL's: P-256 (PushcastWire's P256Key), HKDF-SHA-256 and AES-128-GCM.
//
// Hot path: one WebPushEncryptor per worker, writing into a caller's buffer; the VAPID token is
// signed once per push-service origin and reused for hours.
