/*
 * The idempotency extension from pgJDBC (Debian: libpostgresql-jdbc-java).
 *
 * What psycopg_example.py does, with JDBC: setString sends varchar, so the
 * request and headers need ?::jsonb and the ttl ?::interval (or the URL
 * parameter stringtype=unspecified); getSQLState() is the SQLSTATE (IK001
 * for a key reused with another request).
 *
 * usage: java -cp /usr/share/java/postgresql.jar IdempotencyExample.java JDBC_URL KEY_PREFIX
 *
 * Behind PgBouncer in transaction mode, add prepareThreshold=0 to the URL:
 * by default pgJDBC prepares a statement on the server, by name, from its
 * fifth execution, and the next transaction may run on another server
 * connection.
 */
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Arrays;

public class IdempotencyExample {
	static final String BEGIN = "SELECT outcome, status_code, body, headers::text"
		+ " FROM idempotency.idempotent_begin(?, 'drivers', ?::jsonb, ttl => ?::interval)";
	static final String FINISH = "SELECT idempotency.idempotent_finish(?, NULL, 'drivers',"
		+ " status_code => ?, body => ?, headers => ?::jsonb)";

	/* idempotent_begin: outcome, status_code, body, headers */
	static Object[] begin(Connection c, String key, String request) throws SQLException {
		try (PreparedStatement s = c.prepareStatement(BEGIN)) {
			s.setString(1, key);
			s.setString(2, request);
			s.setString(3, "1 hour");
			try (ResultSet r = s.executeQuery()) {
				r.next();
				return new Object[] {r.getString(1), r.getInt(2), r.getBytes(3), r.getString(4)};
			}
		}
	}

	static void check(boolean ok, String what) {
		if (!ok)
			throw new AssertionError(what);
	}

	public static void main(String[] args) throws Exception {
		String url = args[0], prefix = args[1];
		try (Connection first = DriverManager.getConnection(url);
			 Connection second = DriverManager.getConnection(url)) {
			for (int i = 0; i < 8; i++) {
				String key = prefix + "-" + i;
				String request = "{\"amount\": " + (100 + i) + "}";
				byte[] text = ("{\"id\": " + i + "}").getBytes(StandardCharsets.UTF_8);
				byte[] body = Arrays.copyOf(text, text.length + 2);
				body[text.length + 1] = (byte) 0xff;
				String headers = "{\"Location\": \"/things/" + i + "\", \"Content-Type\": \"application/json\"}";

				first.setAutoCommit(false);
				check(begin(first, key, request)[0].equals("execute"), "execute");
				try (PreparedStatement f = first.prepareStatement(FINISH)) {
					f.setString(1, key);
					f.setInt(2, 201);
					f.setBytes(3, body);
					f.setString(4, headers);
					f.executeQuery().close();
				}
				first.commit();

				Object[] r = begin(second, key, request);
				check(r[0].equals("replay") && (Integer) r[1] == 201
					  && Arrays.equals((byte[]) r[2], body) && r[3].equals(headers),
					  "replay of " + key);

				try {
					begin(second, key, "{\"amount\": 1}");
					throw new AssertionError("a different request was not refused");
				} catch (SQLException e) {
					check("IK001".equals(e.getSQLState()), "IK001, not " + e.getSQLState());
				}
			}
		}
		System.out.println("pgJDBC: 8 keys executed, replayed byte for byte, reuse refused with IK001");
	}
}
