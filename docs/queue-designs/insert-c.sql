INSERT INTO nc (body) SELECT '{"id":' || g || ',"token":"abababababababababababababababababababababababababababababababab","alert":"n"}' FROM generate_series(1,5000) g;
