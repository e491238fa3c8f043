// The versions of the C libraries the wire layer runs on, as the loaded libraries report them
// (not the headers it was compiled against): what `pushcast version` prints.

import CNGHTTP2
import COpenSSL

public enum LinkedLibraries {
    /// OpenSSL_version(OPENSSL_VERSION), e.g. "OpenSSL 3.0.17 1 Jul 2025".
    public static var openSSL: String {
        guard let text = OpenSSL_version(OPENSSL_VERSION) else { return "unknown" }
        return String(cString: text)
    }

    /// nghttp2_version(0)'s version_str, e.g. "1.52.0".
    public static var nghttp2: String {
        guard let info = nghttp2_version(0), let text = info.pointee.version_str else { return "unknown" }
        return String(cString: text)
    }
}
